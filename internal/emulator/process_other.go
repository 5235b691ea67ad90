//go:build !unix

package emulator

import "errors"

type process struct {
	pgid    int
	child   int
	exited  chan struct{}
	waitErr error
}

func startGroup(name string, args []string) (*process, error) {
	return nil, errors.New("emulators are only supported on unix (process groups)")
}

func (p *process) output() string        { return "" }
func (p *process) printed(s string) bool { return false }
func (p *process) stop() error           { return nil }

func groupMembers(pgid int) ([]int, error) { return nil, nil }
func pidAlive(pid int) bool                { return true }
