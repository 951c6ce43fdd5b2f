#!/usr/bin/env python3
"""Packs a directory of raw results (per-crop evaluations, sweeps, logs) into one reproducible
.tar.xz beside it, so that the tracked tree holds one file per study; the summary scripts read the
archive as they read the directory.

Usage: scripts/pack_results.py DIRECTORY   (writes DIRECTORY.tar.xz; remove the directory after)

The archive is the same bytes for the same files: sorted names, no owners, times zero.
"""
import pathlib
import sys
import tarfile


def normalised(info):
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    info.mode = 0o755 if info.isdir() else 0o644
    return info


def main():
    if len(sys.argv) != 2 or not pathlib.Path(sys.argv[1]).is_dir():
        sys.exit(__doc__.strip().splitlines()[-3])
    directory = pathlib.Path(sys.argv[1]).resolve()
    target = directory.with_name(directory.name + ".tar.xz")
    paths = [directory] + sorted(directory.rglob("*"))
    with tarfile.open(target, "w:xz", preset=9) as archive:
        for path in paths:
            archive.add(path, arcname=str(path.relative_to(directory.parent)), recursive=False,
                        filter=normalised)
    print(f"wrote {target} ({target.stat().st_size} bytes, {len(paths) - 1} entries)")


if __name__ == "__main__":
    main()
