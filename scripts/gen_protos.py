"""Generate the Python protobuf modules of lance_ops from protos/*.proto.

Usage: python scripts/gen_protos.py [OUT_DIR]

The generated modules are committed under lance_ops/format/proto/; the test
tests/format/test_protos.py regenerates them into a temporary directory and
diffs, so the committed code always matches the .proto files.
"""
from __future__ import annotations

import pathlib
import re
import sys

from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTOS = ["file.proto", "rowids.proto", "table.proto", "transaction.proto"]


def generate(out_dir: pathlib.Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    import grpc_tools

    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{ROOT / 'protos'}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *[str(ROOT / "protos" / p) for p in PROTOS],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # protoc emits absolute imports ("import file_pb2"); make them package-relative.
    for path in out_dir.glob("*_pb2.py*"):
        text = path.read_text()
        text = re.sub(r"^import (\w+_pb2) as", r"from . import \1 as", text, flags=re.M)
        path.write_text(text)
    init = out_dir / "__init__.py"
    init.write_text('"""Generated protobuf modules (scripts/gen_protos.py). Do not edit."""\n')


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "lance_ops/format/proto")
