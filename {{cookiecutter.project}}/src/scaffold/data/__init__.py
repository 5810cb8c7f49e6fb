"""Data: finding the dataset (finder), the readers (readers, idx), splits and each rank's share."""
