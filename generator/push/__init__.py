"""`gen push`: the files it refuses, the commit it builds and pushes, and the remote's side."""
