#!/usr/bin/env python3
"""bench/gguf_keep_layers.py IN.gguf OUT.gguf N: a copy of a llama-family GGUF
with only its first N blocks (block_count set to N), every other tensor and
key unchanged. Real weights small enough to travel to the GPU machine (64 MiB
working tree): SmolLM2-135M Q4_1 with 6 of its 30 blocks is ~33 MB. Uses the
gguf package's own copy routine (gguf.scripts.gguf_new_metadata)."""
import re
import sys

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    try:
        n = int(sys.argv[3])
        reader = gguf.GGUFReader(src, "r")
        arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
        key = f"{arch}.block_count"
        total = int(reader.fields[key].parts[-1][0])
    except (OSError, ValueError, KeyError) as e:
        print(f"gguf_keep_layers: {src}: {e}", file=sys.stderr)
        return 1
    if not 0 < n <= total:
        print(f"{src}: has {total} blocks, asked for {n}", file=sys.stderr)
        return 1
    keep = []
    for t in reader.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m is None or int(m.group(1)) < n:
            keep.append(t)
    reader.tensors = keep
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, {key: MetadataDetails(gguf.GGUFValueType.UINT32, n)}, [])
    print(f"{dst}: {n} of {total} blocks, {len(keep)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
