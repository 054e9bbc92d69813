import sys, os, time, cosim, subprocess
start_day = float(sys.argv[1]); n = int(sys.argv[2]); mode = sys.argv[3] if len(sys.argv) > 3 else ""
import datetime
s = cosim.Session("scenarios/default.toml", overrides={"scenario.duration_s": int(86400*(start_day+1)),
                  "scenario.start": datetime.datetime(2024,1,1,tzinfo=datetime.timezone.utc)})
s.step()
s.run_until(int(86400*start_day))
if mode == "freeze":
    import gc; gc.freeze()
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
for _ in range(n):
    s.step()
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)
