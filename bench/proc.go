package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicksPerSec is USER_HZ, the unit of /proc/PID/stat's CPU times:
// 100 on every Linux architecture Go supports.
const clockTicksPerSec = 100

// stopGrace is how long a stopped process gets to exit after SIGTERM
// before SIGKILL: a node closing 10,000 partitions needs about half a
// minute on a 2-core machine.
const stopGrace = 90 * time.Second

// process is a child the harness started; it dies with the harness
// (Pdeathsig), so a killed bench leaves no broker behind.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
	err  error         // Wait's result, valid after done
}

// startProcess starts bin with args, its standard error (and standard
// output unless stdout is given) appended to logPath.
func startProcess(bin string, args []string, logPath string, stdout *os.File) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.Stdout = logf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace, then kills. A process that
// exits on SIGTERM with an error status is not an error: the broker may
// report what it was doing.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("bench: %s (pid %d) ignored SIGTERM for %v and was killed", p.cmd.Path, p.pid(), grace)
	}
}

// cpuTime returns the user + system CPU time pid has used, from
// /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("bench: malformed /proc stat line")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0, errors.New("bench: short /proc stat line")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: /proc stat CPU times: %w", err)
	}
	return time.Duration(u+s) * time.Second / clockTicksPerSec, nil
}

// freePorts returns n distinct loopback ports that were free a moment
// ago (they are held together while chosen, so they differ).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitFor calls ok every interval until it returns true or timeout
// passes; it returns the last error ok gave.
func waitFor(timeout, interval time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := ok()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("condition not met")
			}
			return fmt.Errorf("bench: after %v: %w", timeout, err)
		}
		time.Sleep(interval)
	}
}
