import argparse
import logging

log = logging.getLogger(__name__)

def main(argv=None):
    p = argparse.ArgumentParser(description="compile and exec nothing; just counts lines")
    p.add_argument("files", nargs="+")
    args = p.parse_args(argv)
    for name in args.files:
        with open(name) as f:
            log.info("%s: %d lines", name, sum(1 for _ in f))

if __name__ == "__main__":
    main()
