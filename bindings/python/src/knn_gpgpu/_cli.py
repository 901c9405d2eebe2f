"""The ``knn-gpgpu`` console script: runs the command-line tool bundled in the package.

``pip install`` builds the tool (tools/, docs/cli.md) with the library and puts
it beside the library inside the package, linked to that copy; this entry point
only finds it and hands over the arguments, the exit status and the terminal.
"""

import os
import subprocess
import sys
from typing import List, Optional

TOOL_NAME = "knn-gpgpu"


def tool_path() -> str:
    """Where the bundled tool is, whether or not this build has one."""
    name = TOOL_NAME + (".exe" if os.name == "nt" else "")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    tool = tool_path()
    if not os.path.isfile(tool):
        sys.stderr.write(
            "knn-gpgpu: this build of the knn_gpgpu package has no command-line tool (%s is "
            "missing): CLI11 was not found when it was built. Install CLI11 (Debian: "
            "libcli11-dev; nlohmann-json3-dev adds `info --json`, `bench` and `pip`) and "
            "reinstall the package.\n" % tool
        )
        return 127
    if os.name == "nt":
        return subprocess.call([tool] + args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(tool, [TOOL_NAME] + args)  # replaces this process (or raises OSError)


if __name__ == "__main__":
    sys.exit(main())
