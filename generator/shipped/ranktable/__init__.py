"""HCCL rank tables for `gen ranktable`, and for projects as scripts/rank_table.py and siblings."""
