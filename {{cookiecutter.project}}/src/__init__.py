"""Training code shared by the frameworks: config, data, storage and the run record."""
