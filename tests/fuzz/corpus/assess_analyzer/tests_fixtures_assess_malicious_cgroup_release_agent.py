import os
cg = "/tmp/cgrp"
os.makedirs(cg, exist_ok=True)
with open(cg + "/x/notify_on_release", "w") as f:
    f.write("1")
with open(cg + "/release_agent", "w") as f:
    f.write("/cmd")
