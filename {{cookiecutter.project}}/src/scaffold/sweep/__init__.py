"""sweep.py's floor: sweep.yaml's search space (space.py), each trial an ordinary run of train.py
(trials.py), the study and its loop (study.py), the results (results.py)."""
