"""`gen doctor`: whether this host, its engine and the project's image can run the job.

Each check is a hostcheck.Result (✓, ✗ with what was found, what is needed and the fix,
or – when it does not apply): the host's engine, driver and devices (host.py), the project's
files, packages and image (project.py), for the subject chosen (subject.py). The driver and
device rules live in generator/shipped/hostcheck.py, shared with the projects' start-up
check; the data they compare against in images/.
"""
