"""probe.py SCRIPT ARGS...: runs SCRIPT as __main__ and stamps the time at
its end and at Python's atexit; registers exitprobe.so's C atexit handler
last, so that it runs first in exit() (bench/gpu/exitprobe/probe.sh)."""
import atexit, ctypes, os, runpy, sys, time
def st(w): sys.stderr.write("PROBE %s %.6f\n" % (w, time.time())); sys.stderr.flush()
lib = ctypes.CDLL(os.environ["EXITPROBE_SO"])
atexit.register(lambda: st("py-atexit"))
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    st("script-end")
    lib.probe_register()
    raise
