package mig

import (
	"errors"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseProfileName: a profile name is 1 to 8 compute slices, a memory
// size of 1 to 4 digits without a leading zero, and one of the suffixes
// nvidia-smi prints; ProfileNamePattern accepts exactly the same names.
func TestParseProfileName(t *testing.T) {
	tests := map[string]struct {
		want    ProfileName
		wantErr bool
	}{
		"1g.10gb":        {want: ProfileName{ComputeSlices: 1, MemoryGB: 10}},
		"8g.1000gb":      {want: ProfileName{ComputeSlices: 8, MemoryGB: 1000}},
		"1g.10gb+me":     {want: ProfileName{ComputeSlices: 1, MemoryGB: 10, Suffix: "+me"}},
		"1g.10gb-me":     {want: ProfileName{ComputeSlices: 1, MemoryGB: 10, Suffix: "-me"}},
		"1g.10gb+me.all": {want: ProfileName{ComputeSlices: 1, MemoryGB: 10, Suffix: "+me.all"}},
		"1g.24gb+gfx":    {want: ProfileName{ComputeSlices: 1, MemoryGB: 24, Suffix: "+gfx"}},
		"9g.90gb":        {wantErr: true},
		"0g.10gb":        {wantErr: true},
		"1g.0gb":         {wantErr: true},
		"1g.010gb":       {wantErr: true},
		"1g.10000gb":     {wantErr: true},
		"1g.10gb+other":  {wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if regexp.MustCompile(ProfileNamePattern).MatchString(name) == tc.wantErr {
				t.Errorf("ProfileNamePattern matches %q: %t, want %t", name, tc.wantErr, !tc.wantErr)
			}
			got, err := ParseProfileName(name)
			if tc.wantErr {
				if !errors.Is(err, ErrSyntax) {
					t.Errorf("ParseProfileName(%q) = %v, %v; want ErrSyntax", name, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseProfileName(%q) (-want +got):\n%s", name, diff)
			}
		})
	}
}
