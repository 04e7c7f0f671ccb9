package cli

import "testing"

// FuzzParseSbatch: #SBATCH lines of any script either parse or fail with an
// error naming the line; they never panic.
func FuzzParseSbatch(f *testing.F) {
	f.Add("#!/bin/sh\n#SBATCH -N 2 -J sim -a 0-3 -o sim_%A_%a.out\n./sim\n")
	f.Add("#SBATCH --time=1-00:00:00 --qos urgent --gres=gpu:a100:4\n")
	f.Add("#SBATCH --dependency=afterok:1:2?afterany:3\n#SBATCH -C 'a&b'\n")
	f.Add("#SBATCH \"unterminated\n")
	f.Fuzz(func(t *testing.T, script string) {
		_, _ = parseSbatch("job.sh", script, submitOptions{})
	})
}
