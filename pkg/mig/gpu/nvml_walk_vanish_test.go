package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// TestReadsWhenAGIVanishesMidway: a GPU instance (a 1g.10gb at 0 without a
// compute instance) is destroyed by someone else between its listing and
// its read, while a read other than a destroy walks the GPU. The reader
// reads the GPU again and answers for it as it is then: MIGDevices and
// MIGProcesses succeed without the instance gone, and Processes of that
// very instance answers ErrNotFound (its GI is gone), as it documents.
func TestReadsWhenAGIVanishesMidway(t *testing.T) {
	victimDev := mig.Device{Profile: "1g.10gb", Start: 0}
	tests := map[string]struct {
		read func(ctx context.Context, m *gpu.NVMLManager) error
		// check reports what is wrong with err, "" when nothing.
		check func(err error) string
	}{
		"MIGDevices: the GPU as it is once read again": {
			read: func(ctx context.Context, m *gpu.NVMLManager) error {
				devs, err := m.MIGDevices(ctx, 0)
				if err == nil && (len(devs) != 1 || devs[0].Device() != (mig.Device{Profile: "3g.40gb", Start: 4})) {
					return fmt.Errorf("devices %v, want only 3g.40gb@4", devs)
				}
				return err
			},
			check: func(err error) string { return errText(err) },
		},
		"MIGProcesses: the GPU as it is once read again": {
			read:  func(ctx context.Context, m *gpu.NVMLManager) error { _, err := m.MIGProcesses(ctx, 0); return err },
			check: func(err error) string { return errText(err) },
		},
		"Processes of the GPU instance that vanished: ErrNotFound": {
			read: func(ctx context.Context, m *gpu.NVMLManager) error {
				_, err := m.Processes(ctx, 0, victimDev)
				return err
			},
			check: func(err error) string {
				if !errors.Is(err, gpu.ErrNotFound) {
					return fmt.Sprintf("%v: not ErrNotFound, though its GPU instance is gone", err)
				}
				return ""
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			_, m, armed := giVanishRig(t)

			*armed = true
			err := tc.read(ctx, m)
			if *armed {
				t.Fatal("the other GPU instance was never listed: the test did not bite")
			}
			if what := tc.check(err); what != "" {
				t.Error(what)
			}
		})
	}
}

// errText is err's text, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
