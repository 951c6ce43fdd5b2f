"""Raw results as the summary scripts read them: a directory, or the same packed as a .tar.xz
by scripts/pack_results.py."""
import pathlib
import sys
import tarfile
import tempfile


def unpacked(out_dir, scratch):
    """OUT_DIR itself, or the one directory its .tar.xz holds, unpacked under `scratch`."""
    path = pathlib.Path(out_dir)
    if path.is_dir():
        return path
    with tarfile.open(path) as archive:
        archive.extractall(scratch, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (top,) = pathlib.Path(scratch).iterdir()
    return top


def summarise(main, usage, arguments=None):
    """A summary script's command line: one OUT_DIR (a directory or its .tar.xz), whose directory
    `main` reads; `usage` (the script's docstring) when the line is anything else."""
    arguments = sys.argv[1:] if arguments is None else arguments
    if len(arguments) != 1:
        sys.exit(usage)
    with tempfile.TemporaryDirectory() as scratch:
        main(unpacked(arguments[0], scratch))
