"""The platforms' storage: where a run reads and writes (where), OBS, C2Net, uploads, retries."""
