// memburn is the known workload of the cgroup tests: it allocates and
// touches MB megabytes, burns CPU until the process has used SECS seconds
// of CPU time, prints "ready", then stays HOLD seconds.
//
//	memburn MB SECS HOLD
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: memburn MB SECS HOLD")
		os.Exit(2)
	}
	mb, _ := strconv.Atoi(os.Args[1])
	secs, _ := strconv.ParseFloat(os.Args[2], 64)
	hold, _ := strconv.ParseFloat(os.Args[3], 64)
	buf := make([]byte, mb<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	x := 0
	for cpuSeconds() < secs {
		for i := 0; i < 1_000_000; i++ {
			x += i ^ (x >> 3)
		}
	}
	fmt.Println("ready", x&1, buf[len(buf)/2])
	time.Sleep(time.Duration(hold * float64(time.Second)))
	fmt.Println("done", buf[0])
}
