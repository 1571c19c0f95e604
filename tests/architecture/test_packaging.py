"""``pip install .`` installs the ``mhajax`` package and the ``mhajax`` command, and no
generic top-level ``verify`` or ``figures`` package (they are checkout entry points)."""
import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_only_mhajax_and_the_console_script(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel, = tmp_path.glob("mhajax-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"mhajax"}
    assert not any(n.startswith(("verify/", "figures/")) for n in names)
    assert "mhajax/cli/verify.py" in names and "mhajax/figures/main.py" in names
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    points = configparser.ConfigParser()
    points.read_string(zipfile.ZipFile(wheel).read(entry).decode())
    assert points["console_scripts"]["mhajax"] == "mhajax.__main__:main"
