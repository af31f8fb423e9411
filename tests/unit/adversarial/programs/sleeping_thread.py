# The main thread ends but a non-daemon thread sleeps on: the interpreter waits, the wall clock ends it.
# limits: timeout_s=2
# killed_by: timeout
# stdout: main done
import threading
import time

threading.Thread(target=time.sleep, args=(600,)).start()
print("main done", flush=True)
