"""Tiny programs for the child-process tests: `python -m tests.train.children COMMAND`.

    sleep        says "ready", then sleeps a minute (killed or ended by its parent)
    parent MODE  starts `sleep` through childproc, prints its pid, then: "sleep"
                 (a parent to kill -9) or "wait" (waits, passing signals on; says
                 "forwarding" once its handlers are in place, and at the end prints
                 the child's exit status)
    interrupted  says "ready"; on Ctrl-C says so and exits 130
"""

import signal
import sys
import time


def main(argv):
    command = argv[0]
    if command == "sleep":
        print("ready", flush=True)
        time.sleep(60)
        return 0
    if command == "interrupted":
        try:
            print("ready", flush=True)
            time.sleep(60)
        except KeyboardInterrupt:
            print("child: interrupted", flush=True)
            return 130
        return 0
    if command == "parent":
        from prednet_keras.runtime import childproc

        child = childproc.start(["-m", "tests.train.children", argv[2] if len(argv) > 2 else "sleep"])
        print(f"child {child.pid}", flush=True)
        if argv[1] == "wait":
            announced = []

            def forwarding():  # called from inside wait_forwarding, so its signal handlers are in place
                if not announced:
                    announced.append(True)
                    print("forwarding", flush=True)

            print(f"status {child.wait_forwarding(every=forwarding, interval=0.05)}", flush=True)
            return 0
        signal.pause()
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
