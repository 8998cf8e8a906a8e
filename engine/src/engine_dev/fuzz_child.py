"""Child process of test_fuzz: reads each hostile input as the template would, under an
address-space limit, and prints one JSON line per input (a crash or hang shows as a missing
line and a bad exit status in the parent).

python -m engine_dev.fuzz_child JOB.json
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

from engine.data.datasets.csv import CsvDataset
from engine.data.datasets.tar_shards import TarShardDataset
from engine.data.decode import load_sample
from engine.inference import load_model


def limit_address_space(headroom: int) -> None:
    """Allow only `headroom` bytes of address space beyond what the process maps now."""
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.RLIM_INFINITY))


def read(item: dict[str, Any]) -> None:
    """Read one input the way the template's datasets do."""
    if item["kind"] == "image":
        load_sample(item["path"], 0, "x", item.get("min_side"), item["max_pixels"])
    elif item["kind"] == "csv":
        CsvDataset("train", train_csv=item["path"], val_csv=item["path"], root=item["root"])
    elif item["kind"] == "shard":
        path, options = item["path"], item.get("options", {})
        list(TarShardDataset("train", train_shards=path, val_shards=path, **options))
    elif item["kind"] == "manifest":
        shard = item["shard"]
        list(TarShardDataset("train", train_shards=shard, val_shards=shard, manifest=item["path"]))
    else:
        load_model(item["path"])


def main() -> None:
    with open(sys.argv[1]) as f:
        job = json.load(f)
    limit_address_space(job["headroom_bytes"])
    for item in job["items"]:
        result: dict[str, Any] = {"path": item["path"]}
        try:
            read(item)
            result["ok"] = True
        except Exception as err:
            result |= {"ok": False, "type": type(err).__name__, "error": str(err)}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
