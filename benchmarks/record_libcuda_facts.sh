set -u
echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version 2>&1
echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH-<unset>}"
echo "== ldconfig -p | grep -i libcuda"; (ldconfig -p 2>&1 || /sbin/ldconfig -p 2>&1) | grep -i "libcuda\|libnvidia-ml" 
echo "== ls compat"; ls -la /usr/local/cuda*/compat 2>&1 | head; ls -d /usr/local/cuda* 2>&1
echo "== realpath of each"; for f in $( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p) | grep -o '/[^ ]*libcuda\.so[^ ]*'); do echo "$f -> $(readlink -f $f)"; done
echo "== dlopen"; python3 - <<'P'
import ctypes, os
l = ctypes.CDLL("libcuda.so.1")
v = ctypes.c_int(); print("cuDriverGetVersion rc", l.cuDriverGetVersion(ctypes.byref(v)), v.value)
print("cuInit rc", l.cuInit(0))
for line in open("/proc/self/maps"):
    if "libcuda" in line: print(line.split()[-1]); break
import pynvml; pynvml.nvmlInit(); print("nvml driver", pynvml.nvmlSystemGetDriverVersion(), pynvml.nvmlSystemGetCudaDriverVersion())
P
echo "== nvidia-smi"; nvidia-smi | head -5
echo "== env"; env | grep -i "nvidia\|cuda" | sort
echo "== os-release"; head -3 /etc/os-release; cat /proc/1/cgroup 2>/dev/null | head -3; ls /.dockerenv 2>&1
