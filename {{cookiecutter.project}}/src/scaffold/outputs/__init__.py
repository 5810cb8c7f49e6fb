"""What a run leaves: checkpoints kept and found again, pretrained weights in, one run per
output directory (rundir), the run record (record, tensorboard, tracking)."""
