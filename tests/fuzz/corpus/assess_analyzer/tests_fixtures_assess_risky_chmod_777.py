import os

def share(path):
    os.chmod(path, 0o777)
