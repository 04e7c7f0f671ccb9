package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The fingerprint is a function of the machine: stable across reads (and
// so across agent restarts), different when any input changes, and each
// input can be overridden.
func TestMachineFingerprint(t *testing.T) {
	root := t.TempDir()
	base := map[string]string{
		"proc/sys/kernel/osrelease":          "6.1.0-18-amd64\n",
		"proc/cmdline":                       "BOOT_IMAGE=/vmlinuz quiet iommu=pt\n",
		"sys/class/dmi/id/bios_vendor":       "Acme\n",
		"sys/class/dmi/id/bios_version":      "2.4.1\n",
		"sys/module/nvidia/version":          "550.54.15\n",
		"sys/class/infiniband/mlx5_0/fw_ver": "28.39.1002\n",
	}
	writeTree(t, root, base)
	m := ReadMachine(root)
	if m.KernelRelease != "6.1.0-18-amd64" || m.GPUDriver != "nvidia=550.54.15" || m.NICFirmware != "mlx5_0=28.39.1002" ||
		m.BIOS != "bios_vendor=Acme;bios_version=2.4.1" {
		t.Fatalf("facts %+v", m)
	}
	fp := m.Fingerprint(FingerprintInputs{})
	if again := ReadMachine(root).Fingerprint(FingerprintInputs{}); again != fp {
		t.Fatalf("fingerprint not stable: %s then %s", fp, again)
	}
	seen := map[string]string{fp: "base"}
	for path, v := range map[string]string{
		"proc/sys/kernel/osrelease":          "6.1.0-20-amd64",
		"proc/cmdline":                       "BOOT_IMAGE=/vmlinuz quiet",
		"sys/class/dmi/id/bios_version":      "2.5.0",
		"sys/module/nvidia/version":          "550.90.07",
		"sys/class/infiniband/mlx5_0/fw_ver": "28.40.1000",
	} {
		changed := t.TempDir()
		writeTree(t, changed, base)
		writeTree(t, changed, map[string]string{path: v})
		got := ReadMachine(changed).Fingerprint(FingerprintInputs{})
		if prev, dup := seen[got]; dup {
			t.Errorf("changing %s gives the fingerprint of %s", path, prev)
		}
		seen[got] = path
	}
	if o := m.Fingerprint(FingerprintInputs{DriverVersion: "pinned"}); o == fp {
		t.Error("a driver override did not change the fingerprint")
	}
	// Kernel parameters compare as a set of words.
	writeTree(t, root, map[string]string{"proc/cmdline": "iommu=pt BOOT_IMAGE=/vmlinuz  quiet"})
	if got := ReadMachine(root).Fingerprint(FingerprintInputs{}); got != fp {
		t.Error("reordered kernel parameters changed the fingerprint")
	}
}

func TestPowerMeterFromRAPLCounters(t *testing.T) {
	root := t.TempDir()
	if _, err := NewPowerMeter(root); err == nil {
		t.Fatal("a meter without powercap domains")
	}
	writeTree(t, root, map[string]string{
		"sys/class/powercap/intel-rapl:0/energy_uj":           "1000000",
		"sys/class/powercap/intel-rapl:0/max_energy_range_uj": "262143328850",
		"sys/class/powercap/intel-rapl:1/energy_uj":           "262143000000",
		"sys/class/powercap/intel-rapl:1/max_energy_range_uj": "262143328850",
		"sys/class/powercap/intel-rapl:0:0/energy_uj":         "5", // a sub-domain (core): inside package 0
	})
	m, err := NewPowerMeter(root)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	if _, ok := m.Watts(t0); ok {
		t.Fatal("a draw from one reading")
	}
	// 2 s later: package 0 used 200 J, package 1 wrapped after 100 J.
	writeTree(t, root, map[string]string{
		"sys/class/powercap/intel-rapl:0/energy_uj":   "201000000",
		"sys/class/powercap/intel-rapl:1/energy_uj":   "99671150",
		"sys/class/powercap/intel-rapl:0:0/energy_uj": "999999999",
	})
	w, ok := m.Watts(t0.Add(2 * time.Second))
	if !ok || w != 150 {
		t.Fatalf("draw %d W (%v), want 150 W", w, ok)
	}
}

// On a real Linux host with RAPL: the fingerprint of this machine is
// stable and the draw is measured.
func TestRealHostFingerprintAndPower(t *testing.T) {
	if _, err := os.Stat("/sys/class/powercap"); err != nil {
		t.Skipf("no /sys/class/powercap on this host (%v): measured power cannot be tested here", err)
	}
	fp := ReadMachine("/").Fingerprint(FingerprintInputs{})
	if again := ReadMachine("/").Fingerprint(FingerprintInputs{}); again != fp {
		t.Errorf("fingerprint of this host not stable: %s then %s", fp, again)
	}
	m, err := NewPowerMeter("/")
	if err != nil {
		t.Skipf("powercap present but no readable RAPL package domain: %v", err)
	}
	m.Watts(time.Now())
	time.Sleep(500 * time.Millisecond)
	w, ok := m.Watts(time.Now())
	if !ok || w <= 0 {
		t.Errorf("measured %d W (%v), want a positive draw", w, ok)
	}
	a, err := New(Config{ID: "p", Servers: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), PowerMeter: m,
		Nodes: restartConfig(t.TempDir()).Nodes})
	if err != nil {
		t.Fatal(err)
	}
	a.heartbeat()
	time.Sleep(200 * time.Millisecond)
	if hb := a.heartbeat().GetHeartbeat(); len(hb.Watts) != 1 || hb.Watts[0] <= 0 {
		t.Errorf("heartbeat %v carries no measured draw", hb)
	}
}

func TestHeartbeatCarriesMeasuredDraw(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"sys/class/powercap/intel-rapl:0/energy_uj": "0"})
	m, err := NewPowerMeter(root)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{ID: "p", Servers: []string{"127.0.0.1:1"}, DataDir: t.TempDir(), PowerMeter: m, Nodes: restartConfig(t.TempDir()).Nodes})
	if err != nil {
		t.Fatal(err)
	}
	if hb := a.heartbeat().GetHeartbeat(); len(hb.Watts) != 0 {
		t.Errorf("first heartbeat %v: no draw can be known yet", hb)
	}
	time.Sleep(100 * time.Millisecond)
	writeTree(t, root, map[string]string{"sys/class/powercap/intel-rapl:0/energy_uj": "1000000000"}) // 1 kJ
	if hb := a.heartbeat().GetHeartbeat(); len(hb.Watts) != 1 || hb.Watts[0] <= 0 {
		t.Errorf("heartbeat %v carries no measured draw", hb)
	}
}
