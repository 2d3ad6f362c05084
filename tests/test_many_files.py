"""Many files at once: worker processes and the cache change nothing in what is reported."""
import json
import shutil

from helpers import ROOT, devlint, git


def test_cold_warm_and_parallel_runs_agree(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures", project)
    for i in range(12):  # enough files for the workers to share
        shutil.copy(project / "DEV003.py", project / f"copy_{i}.py")
    cache = tmp_path / "cache"
    runs = {
        "serial": devlint("--isolated", "--no-cache", "-j", "1", "--output-format", "json", ".", cwd=project),
        "parallel-cold": devlint("--isolated", "--cache-dir", str(cache), "-j", "2", "--output-format", "json", ".", cwd=project),
        "warm": devlint("--isolated", "--cache-dir", str(cache), "-j", "2", "--output-format", "json", ".", cwd=project),
    }
    outputs = {name: json.loads(r.stdout) for name, r in runs.items()}
    assert outputs["serial"] and outputs["serial"] == outputs["parallel-cold"] == outputs["warm"]
    # one entry per distinct content: the twelve copies share theirs
    assert len(list(cache.rglob("*.json"))) == len({p.read_bytes() for p in project.glob("*.py")})
    assert (cache / "CACHEDIR.TAG").is_file()


def test_cache_follows_content_and_settings(tmp_path):
    (tmp_path / "m.py").write_text("import torch\nx = y.cuda()\n")
    first = devlint("--isolated", "--output-format", "json", "m.py", cwd=tmp_path)
    assert [x["code"] for x in json.loads(first.stdout)] == ["DEV001"]
    assert (tmp_path / ".devlint_cache").is_dir()
    (tmp_path / "m.py").write_text("import torch\nx = torch.load(p)\n")
    changed = devlint("--isolated", "--output-format", "json", "m.py", cwd=tmp_path)
    assert [x["code"] for x in json.loads(changed.stdout)] == ["DEV002"]
    ignored = devlint("--isolated", "--ignore", "DEV002", "m.py", cwd=tmp_path)
    assert ignored.stdout == "All checks passed!\n"


def test_the_cache_stays_out_of_git_status(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "m.py").write_text("import torch\nx = y.cuda()\n")
    git(tmp_path, "add", "m.py")
    git(tmp_path, "commit", "-qm", "buggy")
    r = devlint(".", cwd=tmp_path)
    assert r.returncode == 1 and "DEV001" in r.stdout
    assert (tmp_path / ".devlint_cache" / ".gitignore").read_text() == "# Automatically created by devlint.\n*\n"
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all").stdout == ""


def test_a_changed_devlint_is_not_answered_from_the_cache(tmp_path):
    """In a checkout or an editable install the version stays while the rules change."""
    import os

    import devlint.rules.dev001 as rule_module

    (tmp_path / "m.py").write_text("import torch\nx = y.cuda()\n")
    cache = tmp_path / "cache"
    devlint("--isolated", "--cache-dir", str(cache), "m.py", cwd=tmp_path)
    assert len(list(cache.rglob("*.json"))) == 1
    source = rule_module.__file__
    stat = os.stat(source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    try:
        devlint("--isolated", "--cache-dir", str(cache), "m.py", cwd=tmp_path)
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert len(list(cache.rglob("*.json"))) == 2  # checked again, under a new key
