#!/usr/bin/env python3
"""Scores `sandboxrun assess` against a labelled corpus (labels.tsv: file, LEVEL, category, reason).

Prints exact agreement, HIGH+BLOCKED recall, BLOCKED recall and the LOW false-positive rate (LOW
files rated above LOW), the confusion matrix and every disagreement. For files that cannot run
as Python 3 (category 'malformed' whose label is BLOCKED), an error exit without a verdict
counts as agreement, as the policy allows. Usage: score-assess.py CORPUS_DIR [SANDBOXRUN]
"""
import json, os, subprocess, sys

LEVELS = ["LOW", "MEDIUM", "HIGH", "BLOCKED"]

def main():
    corpus = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "build", "sandboxrun")
    rows = []
    with open(os.path.join(corpus, "labels.tsv")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 2 and parts[1] in LEVELS:
                rows.append((parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
    got = {}
    for name, label, cat in rows:
        p = subprocess.run([binary, "assess", "--json", os.path.join(corpus, name)], capture_output=True, timeout=60)
        try:
            got[name] = json.loads(p.stdout.decode().splitlines()[0])["level"]
        except Exception:
            got[name] = "ERROR"
    exact = hb_total = hb_hit = b_total = b_hit = low_total = low_fp = 0
    confusion = {}
    misses = []
    for name, label, cat in rows:
        g = got[name]
        ok = g == label or (g == "ERROR" and label == "BLOCKED" and cat == "malformed")
        exact += ok
        if label in ("HIGH", "BLOCKED"):
            hb_total += 1
            hb_hit += g in ("HIGH", "BLOCKED") or (g == "ERROR" and cat == "malformed")
        if label == "BLOCKED":
            b_total += 1
            b_hit += g == "BLOCKED" or (g == "ERROR" and cat == "malformed")
        if label == "LOW":
            low_total += 1
            low_fp += g != "LOW"
        confusion[(label, g)] = confusion.get((label, g), 0) + 1
        if not ok:
            misses.append(f"  {name}: labelled {label}, got {g} ({cat})")
    n = len(rows)
    print(f"files {n}: exact {exact/n:.3f}  HIGH+BLOCKED recall {hb_hit/max(hb_total,1):.3f}  "
          f"BLOCKED recall {b_hit/max(b_total,1):.3f}  LOW false positives {low_fp/max(low_total,1):.3f} "
          f"({low_fp}/{low_total})")
    print("confusion (label -> got):")
    for label in LEVELS:
        print("  " + label.ljust(8) + " ".join(f"{g}:{confusion.get((label, g), 0)}" for g in LEVELS + ["ERROR"]))
    if "-v" in sys.argv:
        print("disagreements:")
        print("\n".join(misses))

if __name__ == "__main__":
    main()
