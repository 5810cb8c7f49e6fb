"""Data: finding the dataset (finder), the built-in readers and their detection (readers,
idx), the splits they return (splits) and each rank's share of them (sharding)."""
