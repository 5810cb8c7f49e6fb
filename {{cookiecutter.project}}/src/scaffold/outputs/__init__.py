"""What a run leaves: checkpoints, pretrained weights in, one run per directory, its record."""
