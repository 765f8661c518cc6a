package v1alpha1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseClearXidsRequest: a request names an ID and, optionally, GPUs;
// what is not such a request is refused with an error saying why.
func TestParseClearXidsRequest(t *testing.T) {
	tests := map[string]struct {
		value   string
		want    ClearXidsRequest
		wantErr string
	}{
		"every GPU":          {value: `{"id":"2026-12-06T20:30:00Z"}`, want: ClearXidsRequest{ID: "2026-12-06T20:30:00Z"}},
		"some GPUs":          {value: ` {"id":"a","gpus":[0,3]} `, want: ClearXidsRequest{ID: "a", GPUs: []int{0, 3}}},
		"empty GPU list":     {value: `{"id":"a","gpus":[]}`, want: ClearXidsRequest{ID: "a", GPUs: []int{}}},
		"no ID":              {value: `{"gpus":[0]}`, wantErr: "id is required"},
		"empty":              {value: ``, wantErr: "want JSON"},
		"plain text":         {value: `all`, wantErr: "want JSON"},
		"unknown field":      {value: `{"id":"a","gpu":[0]}`, wantErr: `unknown field "gpu"`},
		"two values":         {value: `{"id":"a"}{"id":"b"}`, wantErr: "more than one JSON value"},
		"negative GPU":       {value: `{"id":"a","gpus":[-1]}`, wantErr: "GPU index -1 is negative"},
		"GPU index not int":  {value: `{"id":"a","gpus":["0"]}`, wantErr: "want JSON"},
		"ID too long":        {value: `{"id":"` + strings.Repeat("x", 129) + `"}`, wantErr: "id is 129 characters, at most 128"},
		"ID at the limit":    {value: `{"id":"` + strings.Repeat("x", 128) + `"}`, want: ClearXidsRequest{ID: strings.Repeat("x", 128)}},
		"too many GPUs":      {value: `{"id":"a","gpus":[` + strings.Repeat("0,", 64) + `0]}`, wantErr: "65 GPUs, at most 64"},
		"ID of another type": {value: `{"id":7}`, wantErr: "want JSON"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseClearXidsRequest(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}
