"""Make the document files bench_grammar_mask reads from MaskBench's data.

    python3 bench/maskbench_docs.py MASKBENCH_DATA_DIR OUT_PREFIX [N_SCHEMA_FILES] [N_JSON_DOCS]

MASKBENCH_DATA_DIR is maskbench/data/ of github.com/guidance-ai/jsonschemabench
(Apache-2.0). Writes OUT_PREFIX.schema.jsonl: one line {"schema", "doc"} per
valid instance of a seeded sample (seed 26) of the files that have valid
instances; and OUT_PREFIX.json.jsonl: the first N_JSON_DOCS of those
instances that are JSON objects, one document per line, for the built-in
JSON-object grammar. Documents are written compactly (json.dumps defaults
with separators ", " and ": "), as MaskBench feeds them to the tokenizer.
"""
import glob
import json
import os
import random
import sys


def main():
    data, out = sys.argv[1], sys.argv[2]
    n_files = int(sys.argv[3]) if len(sys.argv) > 3 else 700
    n_json = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    files = []
    for path in sorted(glob.glob(os.path.join(data, "*.json"))):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        valid = [t["data"] for t in d.get("tests", []) if t.get("valid")]
        if valid:
            files.append((d["schema"], valid))
    random.Random(26).shuffle(files)
    files = files[:n_files]
    n_obj = 0
    with open(out + ".schema.jsonl", "w", encoding="utf-8") as fs, open(out + ".json.jsonl", "w", encoding="utf-8") as fj:
        for schema, valid in files:
            for doc in valid:
                text = json.dumps(doc, ensure_ascii=False)
                fs.write(json.dumps({"schema": schema, "doc": text}, ensure_ascii=False) + "\n")
                if isinstance(doc, dict) and n_obj < n_json:
                    fj.write(json.dumps({"doc": text}, ensure_ascii=False) + "\n")
                    n_obj += 1


if __name__ == "__main__":
    main()
