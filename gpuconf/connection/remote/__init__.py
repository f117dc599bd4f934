"""The remote runner, in parts: standard-library Python 3.6 sent to each host on stdin with
every request and run there (gpuconf/connection/base.py joins the parts into one script).
Nothing here runs on the controller, except in the tests that read a part's tables."""
