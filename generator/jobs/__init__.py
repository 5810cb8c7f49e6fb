"""Kubernetes training jobs for a generated project.

``spec`` turns a request and the project's record into a checked JobSpec; one module
per kind (trainjob, pytorchjob, volcano, ascendjob) builds its documents as plain
dicts from the pod pieces in ``pod``; ``manifests`` picks the kind and dumps YAML.
The package imports nothing heavy, so `gen` starts as fast with it as without.
"""
