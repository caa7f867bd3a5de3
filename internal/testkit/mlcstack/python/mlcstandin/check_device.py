"""Stand-in for mlc_llm.cli.check_device: prints, for the device type in
argv[1], "check_device:" and the comma-separated indices TVM finds. The
stand-in runs on the CPU: cpu has device 0, every other type none."""

import sys


def main():
    device_type = sys.argv[1] if len(sys.argv) > 1 else ""
    print("check_device:" + ("0" if device_type == "cpu" else ""))


if __name__ == "__main__":
    main()
