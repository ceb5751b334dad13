"""The engine's allocator settings, on the real C library: in a process of its own, so that what one
test frees does not muddle another's resident memory."""
import subprocess
import sys
import textwrap

from sfubench.config import ROOT

# Fills the heap from worker threads with small buffers (as page-server threads do with the pages'
# posts), keeps one in twenty alive so that no arena can shrink from its top, frees the rest, and
# prints the resident memory before and after give_back().
FRAGMENT = textwrap.dedent("""
    import threading, psutil
    from sfubench.memory import give_back, settle_allocator
    settle_allocator()
    kept = []
    def fill():
        blocks = [bytearray(2000) for _ in range(40_000)]
        kept.extend(blocks[::20])
    threads = [threading.Thread(target=fill) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    rss = psutil.Process().memory_info().rss
    gave = give_back()
    print(rss, psutil.Process().memory_info().rss, gave, len(kept))
""")


def test_memory_freed_inside_the_arenas_goes_back_to_the_system():
    out = subprocess.run([sys.executable, "-c", FRAGMENT], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    before, after, gave = int(out[0]), int(out[1]), out[2]
    # 320 MB were allocated and 95 % freed: the freed pages between the survivors stay resident
    # until given back
    assert gave == "True"
    assert before - after > 150e6, (before, after)
