"""Raw results as the summary scripts read them: a directory, or the same packed as a .tar.xz
by scripts/pack_results.py."""
import pathlib
import tarfile


def unpacked(out_dir, scratch):
    """OUT_DIR itself, or the one directory its .tar.xz holds, unpacked under `scratch`."""
    path = pathlib.Path(out_dir)
    if path.is_dir():
        return path
    with tarfile.open(path) as archive:
        archive.extractall(scratch, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (top,) = pathlib.Path(scratch).iterdir()
    return top
