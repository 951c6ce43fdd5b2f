#!/usr/bin/env python3
"""Extracts Universal Dependencies treebanks from git mirrors of their GitHub repositories into
data/ud/, for the UNN dependency-parsing experiment (Table 4 of the UNN paper, which used UD 2.7).
Python 3.11 standard library and the git command only; nothing is downloaded.

Source repositories and commits written to data/ud/ (each the newest commit of the repository's
default branch, master, in the snapshot the `fetch` tool brought; UD release = the release tag
whose .conllu files are identical):

  UniversalDependencies/UD_English-ParTUT      bd9434bf851c0f33b883efaac57c00c25aab296a  UD 2.16
  UniversalDependencies/UD_Afrikaans-AfriBooms  a6dd726120c8bf1a0f8fb40f6a9ca15e880a192a  UD 2.18
  UniversalDependencies/UD_Hungarian-Szeged    8f08ba648e6f6345212a721b7cb1ad78c5924f0e  UD 2.18
  UniversalDependencies/UD_Telugu-MTG          fea14d143ec43ba42b0b82381b55fd509839a1a0  UD 2.16

The paper's other six treebanks (Arabic-PADT, Czech-PDT, Italian-ISDT, Persian-Seraji,
Portuguese-Bosque, Swedish-Talbanken) cannot be extracted this way: their train (and for PADT
and PDT every) .conllu file is 4 MiB or larger and absent from the snapshots. See
data/ud/README.md.

For each treebank, OUT/<code>/ receives (code = the prefix of the .conllu names, e.g. en_partut):
  train.conllu.gz, dev.conllu.gz, test.conllu.gz
      the repository's <code>-ud-<split>.conllu, bytes unchanged (a split kept in several files,
      as <code>-ud-train-*.conllu in Czech-PDT, is the concatenation in name order), gzip level 9
      with mtime 0 and no file name, so every run gives the same bytes
  LICENSE        the repository's LICENSE.txt (or, if it has none, the README's licence lines)
  README.md / README.txt   the repository's README, whole
  SOURCE         repository, commit, and the git blob id of every file taken

Usage (from the repository root):

    python3 scripts/convert_ud.py --out data/ud            # the PINNED treebanks, from
                                                           # /work/.mirror/<owner>+<name>/repo
    python3 scripts/convert_ud.py --out DIR MIRROR[@COMMIT] ...
    python3 scripts/convert_ud.py --out DIR --ref r2.7 MIRROR ...   # e.g. the paper's UD 2.7
    python3 scripts/convert_ud.py --stats DIR               # sentences, multi-word tokens and
                                                           # empty nodes of each written split

MIRROR is a bare git directory such as /work/.mirror/UniversalDependencies+UD_English-ParTUT/repo
(the repository name is read from the "<owner>+<name>" folder above it). COMMIT (or --ref) is any
git revision; without either, PINNED's commit is used for a pinned repository, else HEAD.
A treebank whose files cannot be read (missing blobs, Git LFS pointers) is skipped with a message
on stderr and the exit status is 1; the others are still written.
"""
import argparse
import gzip
import io
import re
import subprocess
import sys
from pathlib import Path

MIRROR_ROOT = Path("/work/.mirror")
PINNED = {
    "UniversalDependencies/UD_English-ParTUT": "bd9434bf851c0f33b883efaac57c00c25aab296a",
    "UniversalDependencies/UD_Afrikaans-AfriBooms": "a6dd726120c8bf1a0f8fb40f6a9ca15e880a192a",
    "UniversalDependencies/UD_Hungarian-Szeged": "8f08ba648e6f6345212a721b7cb1ad78c5924f0e",
    "UniversalDependencies/UD_Telugu-MTG": "fea14d143ec43ba42b0b82381b55fd509839a1a0",
}
SPLITS = ("train", "dev", "test")
CONLLU = re.compile(r"^([a-z]+_[a-z0-9]+)-ud-(train|dev|test)(-[A-Za-z0-9]+)?\.conllu$")


def git(mirror, *args):
    result = subprocess.run(["git", "--git-dir", str(mirror), *args], capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def repo_name(mirror):
    folder = Path(mirror).resolve()
    if folder.name == "repo":
        folder = folder.parent
    return folder.name.replace("+", "/", 1) if "+" in folder.name else folder.name


def gzip_bytes(data):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def blob(mirror, sha, path):
    if subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", sha]).returncode != 0:
        raise RuntimeError(f"{path} (blob {sha}) is not in the mirror (snapshots lack files of 4 MiB and more)")
    data = git(mirror, "cat-file", "blob", sha)
    if data.startswith(b"version https://git-lfs"):
        raise RuntimeError(f"{path} is a Git LFS pointer")
    return data


def licence_from_readme(readme):
    lines = [line for line in readme.decode("utf-8").splitlines() if "licen" in line.lower()]
    if not lines:
        raise RuntimeError("no LICENSE.txt and no licence line in the README")
    return ("\n".join(lines) + "\n").encode("utf-8")


def convert(mirror, commit, out):
    repo = repo_name(mirror)
    commit = git(mirror, "rev-parse", "--verify", commit + "^{commit}").decode().strip()
    tree = {}  # top-level file name -> blob id
    for line in git(mirror, "ls-tree", commit).decode().splitlines():
        meta, name = line.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":
            tree[name] = sha
    parts = {split: [] for split in SPLITS}
    codes = set()
    for name in sorted(tree):
        m = CONLLU.match(name)
        if m:
            codes.add(m.group(1))
            parts[m.group(2)].append(name)
    if len(codes) != 1 or not all(parts.values()):
        raise RuntimeError(f"expected one treebank with train/dev/test .conllu files, found {sorted(codes)}: {parts}")
    code = codes.pop()
    taken = []
    files = {}
    for split in SPLITS:
        data = b"".join(blob(mirror, tree[name], name) for name in parts[split])
        taken += parts[split]
        files[f"{split}.conllu.gz"] = gzip_bytes(data)
    readme_name = next((n for n in ("README.md", "README.txt", "README") if n in tree), None)
    if readme_name is None:
        raise RuntimeError("no README")
    readme = blob(mirror, tree[readme_name], readme_name)
    files[readme_name] = readme
    taken.append(readme_name)
    if "LICENSE.txt" in tree:
        files["LICENSE"] = blob(mirror, tree["LICENSE.txt"], "LICENSE.txt")
        taken.append("LICENSE.txt")
    else:
        files["LICENSE"] = licence_from_readme(readme)
    source = [f"repository: https://github.com/{repo}", f"commit: {commit}", "files (git blob id, path):"]
    source += [f"  {tree[name]}  {name}" for name in taken]
    files["SOURCE"] = ("\n".join(source) + "\n").encode("utf-8")
    target = Path(out) / code
    target.mkdir(parents=True, exist_ok=True)
    for stale in ("README.md", "README.txt", "README"):  # another commit may name its README otherwise
        (target / stale).unlink(missing_ok=True)
    for name, data in files.items():
        (target / name).write_bytes(data)
    return code, repo, commit


def sentence_stats(data):
    """Sentences (blank-line-separated blocks with at least one non-comment line), word lines
    (integer IDs), multi-word token lines (ID ranges such as 3-4) and empty nodes (IDs such as
    5.1) of a CoNLL-U text."""
    sentences = words = mwt = empty = 0
    in_sentence = False
    for line in data.decode("utf-8").split("\n"):
        line = line.rstrip("\r")
        if not line.strip():
            in_sentence = False
            continue
        if line.startswith("#"):
            continue
        if not in_sentence:
            sentences += 1
            in_sentence = True
        ident = line.split("\t", 1)[0]
        if "-" in ident:
            mwt += 1
        elif "." in ident:
            empty += 1
        else:
            words += 1
    return sentences, words, mwt, empty


def print_stats(out):
    print("| treebank | split | sentences | words | multi-word tokens | empty nodes |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for folder in sorted(p for p in Path(out).iterdir() if p.is_dir()):
        for split in SPLITS:
            path = folder / f"{split}.conllu.gz"
            if path.exists():
                s, w, m, e = sentence_stats(gzip.decompress(path.read_bytes()))
                print(f"| {folder.name} | {split} | {s:,} | {w:,} | {m:,} | {e:,} |")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mirrors", nargs="*", help="MIRROR[@COMMIT]; default: the PINNED treebanks")
    parser.add_argument("--out", help="output directory, e.g. data/ud")
    parser.add_argument("--ref", help="git revision to take from every mirror (overrides PINNED)")
    parser.add_argument("--stats", metavar="DIR", help="print the statistics of DIR and exit")
    args = parser.parse_args(argv)
    if args.stats:
        print_stats(args.stats)
        return 0
    if not args.out:
        parser.error("--out is required")
    jobs = []
    for item in args.mirrors or [str(MIRROR_ROOT / r.replace("/", "+", 1) / "repo") for r in PINNED]:
        mirror, _, commit = item.partition("@")
        jobs.append((mirror, commit or args.ref or PINNED.get(repo_name(mirror), "HEAD")))
    failed = 0
    for mirror, commit in jobs:
        try:
            code, repo, full = convert(mirror, commit, args.out)
            print(f"{code}: {repo} @ {full}")
        except (RuntimeError, OSError) as error:
            failed += 1
            print(f"skipped {repo_name(mirror)} @ {commit}: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
