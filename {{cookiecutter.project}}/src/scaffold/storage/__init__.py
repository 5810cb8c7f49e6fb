"""The platforms' storage: where a run reads and writes on this node (where), OBS through
moxing, OpenI C2Net, uploads of the outputs, retries, and steps run once per node."""
