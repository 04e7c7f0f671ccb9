package agent

import (
	"strings"
	"testing"
	"time"
)

func TestGPUToolOutputs(t *testing.T) {
	cases := []struct {
		name, out string
		parse     func(string) (string, int)
		wantType  string
		wantN     int
	}{
		{"nvidia-smi, 4 GPUs", "NVIDIA A100-SXM4-80GB\nNVIDIA A100-SXM4-80GB\nNVIDIA A100-SXM4-80GB\nNVIDIA A100-SXM4-80GB\n", parseNvidiaSMI, "NVIDIA A100-SXM4-80GB", 4},
		{"nvidia-smi, none", "\n", parseNvidiaSMI, "", 0},
		{"rocm-smi, 2 cards", "device,Card series,Card model,Card vendor,Card SKU\ncard0,AMD Instinct MI250X,0x740c,Advanced Micro Devices,D65210\ncard1,AMD Instinct MI250X,0x740c,Advanced Micro Devices,D65210\n", parseRocmSMI, "AMD Instinct MI250X", 2},
		{"rocm-smi, banner lines", "===== ROCm System Management Interface =====\ndevice,Card series\ncard0,MI300X\n===== End =====\n", parseRocmSMI, "MI300X", 1},
		{"rocm-smi, none", "WARNING: No AMD GPUs specified\n", parseRocmSMI, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ, n := tc.parse(tc.out)
			if typ != tc.wantType || n != tc.wantN {
				t.Errorf("got %q × %d, want %q × %d", typ, n, tc.wantType, tc.wantN)
			}
		})
	}
}

func TestReadHardware(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"proc/cpuinfo": "processor\t: 0\nvendor_id\t: GenuineIntel\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n",
		"proc/meminfo": "MemTotal:        2097152 kB\nMemFree:  12 kB\n",
	})
	if h := ReadHardware(root); h.CPUs != 2 || h.MemoryMB != 2048 {
		t.Errorf("hardware %+v, want 2 CPUs and 2048 MiB", h)
	}
	if h := ReadHardware(t.TempDir()); h.CPUs != 0 || h.MemoryMB != 0 {
		t.Errorf("an empty machine tree gives %+v, want nothing detected", h)
	}
}

// The re-check names what changed, leaves out pinned inputs, and reports
// only a real change.
func TestFingerprintRecheck(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"proc/sys/kernel/osrelease": "6.1\n", "sys/module/nvidia/version": "550\n"})
	cfg := restartConfig(t.TempDir())
	cfg.Machine = func() MachineFacts { return ReadMachine(root) }
	cfg.Nodes[0].Fingerprint = ReadMachine(root).Fingerprint(FingerprintInputs{})
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m := a.recheckFingerprint(); m != nil {
		t.Fatalf("unchanged machine reported %v", m)
	}
	writeTree(t, root, map[string]string{"sys/module/nvidia/version": "555\n"})
	m := a.recheckFingerprint().GetNodeFacts()
	if m == nil || len(m.Nodes) != 1 || !strings.Contains(m.Nodes[0].Detail, `GPU driver "nvidia=550" → "nvidia=555"`) {
		t.Fatalf("drift reported as %v, want the GPU driver change", m)
	}
	if m := a.recheckFingerprint(); m != nil {
		t.Errorf("the same drift reported twice: %v", m)
	}
	got := ReadMachine(root).Changed(ReadMachine(root), FingerprintInputs{})
	if len(got) != 0 {
		t.Errorf("no change, yet %v", got)
	}
	old := MachineFacts{KernelRelease: "6.1", GPUDriver: "a"}
	now := MachineFacts{KernelRelease: "6.2", GPUDriver: "b"}
	if got := now.Changed(old, FingerprintInputs{DriverVersion: "pinned"}); len(got) != 1 || !strings.HasPrefix(got[0], "kernel release") {
		t.Errorf("with the driver pinned, changed %v, want only the kernel release", got)
	}
}

func TestGPUPower(t *testing.T) {
	cases := []struct {
		out  string
		want int
		ok   bool
	}{
		{"312.45\n298.10\n", 611, true},
		{"[N/A]\n75.2\n", 75, true},
		{"[N/A]\n", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		if w, ok := parseGPUPower(tc.out); w != tc.want || ok != tc.ok {
			t.Errorf("parseGPUPower(%q) = %d, %v; want %d, %v", tc.out, w, ok, tc.want, tc.ok)
		}
	}
	// The GPUs' draw adds to the CPU packages'.
	root := t.TempDir()
	writeTree(t, root, map[string]string{"sys/class/powercap/intel-rapl:0/energy_uj": "0"})
	m, err := NewPowerMeter(root)
	if err != nil {
		t.Fatal(err)
	}
	m.GPUs = func() (int, bool) { return 600, true }
	t0 := time.Unix(1000, 0)
	m.Watts(t0)
	writeTree(t, root, map[string]string{"sys/class/powercap/intel-rapl:0/energy_uj": "100000000"}) // 100 J
	if w, ok := m.Watts(t0.Add(time.Second)); !ok || w != 700 {
		t.Errorf("draw %d W (%v), want 100 W of CPU + 600 W of GPUs", w, ok)
	}
}
