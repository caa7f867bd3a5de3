package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// prepare checks the GPUs, gets the world's NVSHMEM uid and computes every
// spawned engine's command line and environment.
func (f *Fleet) prepare(ctx context.Context) error {
	if !f.spec.spawnsAny() {
		return nil
	}
	if err := f.checkGPUs(); err != nil {
		return err
	}
	f.sp = newSpawner(f.logger)
	f.uid = f.uidSource()
	uctx, cancel := context.WithTimeout(ctx, f.settings().StartupTimeout)
	defer cancel()
	uid, err := f.uid.UID(uctx)
	if err != nil {
		return fmt.Errorf("NVSHMEM uid: %w", err)
	}
	for _, e := range f.engines {
		if err := e.prepare(uid); err != nil {
			return err
		}
	}
	return nil
}

// uidSource returns Options.UIDSource or the source Spec.UID names.
func (f *Fleet) uidSource() UIDSource {
	switch {
	case f.opts.UIDSource != nil:
		return f.opts.UIDSource
	case f.spec.UID == UIDNVSHMEM:
		python := f.spec.Kind.Driver().NVSHMEMPython(f.spec)
		return &NVSHMEMHelper{Python: python, Grace: f.settings().StopGrace, logs: f.logger}
	default:
		return RandomUID{}
	}
}

// checkGPUs logs this machine's GPUs (index, name, memory) and refuses a
// spec that needs more GPUs than there are. Only engines whose kind uses
// GPUs are checked (mlc): builtin engines run on the CPU, and a command
// may run anything. Without NVML it logs once and lets the engines find
// out.
func (f *Fleet) checkGPUs() error {
	if !f.spec.Kind.Driver().Traits().UsesGPUs {
		return nil
	}
	inventory := f.opts.Inventory
	if inventory == nil {
		inventory = Inventory
	}
	gpus, err := inventory(f.logger())
	if errors.Is(err, ErrNoNVML) {
		f.logger().Warn("cannot check the GPUs of this machine", zap.Error(err))
		return nil
	}
	if err != nil {
		return err
	}
	return enoughGPUs(len(gpus), f.spec.LocalGPUsNeeded())
}

// readyLog logs that engine i became ready.
func (f *Fleet) readyLog(i int, took time.Duration) {
	ep := f.engines[i].ep
	f.logger().Info(fmt.Sprintf("engine %d/%d %s ready", i+1, len(f.engines), ep.Addr()),
		zap.Stringer("took", took.Round(time.Millisecond)))
}
