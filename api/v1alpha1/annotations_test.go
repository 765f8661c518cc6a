package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// at is 2026-12-06 at hh:mm UTC.
func at(hh, mm int) *metav1.Time {
	return &metav1.Time{Time: time.Date(2026, 12, 6, hh, mm, 0, 0, time.UTC)}
}

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
		"earlier requests": {value: `{"id":"a","gpus":[1],"earlier":[{"gpus":[0],"requestedAt":"2026-12-06T20:30:00Z"},{}]}`,
			want: ClearXidsRequest{ID: "a", GPUs: []int{1}, Earlier: []ClearXidsPart{{GPUs: []int{0}, RequestedAt: at(20, 30)}, {}}}},
		"earlier negative GPU":     {value: `{"id":"a","earlier":[{"gpus":[1]},{"gpus":[-2]}]}`, wantErr: "earlier[1]: GPU index -2 is negative"},
		"earlier too many GPUs":    {value: `{"id":"a","earlier":[{"gpus":[` + strings.Repeat("0,", 64) + `0]}]}`, wantErr: "earlier[0]: 65 GPUs, at most 64"},
		"too many earlier":         {value: `{"id":"a","earlier":[` + strings.Repeat("{},", 64) + `{}]}`, wantErr: "65 earlier requests, at most 64"},
		"earlier of unknown field": {value: `{"id":"a","earlier":[{"id":"b"}]}`, wantErr: `unknown field "id"`},
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

// TestClearXidsRequestMerge: a request replacing another carries, for
// each GPU, the latest time the replaced one (and what it carried) asked
// to clear it before, where neither the new request nor a part naming
// every GPU asks for as much; parts without a time are dropped.
func TestClearXidsRequestMerge(t *testing.T) {
	req := func(gpus []int, t *metav1.Time, earlier ...ClearXidsPart) ClearXidsRequest {
		return ClearXidsRequest{ID: "new", GPUs: gpus, RequestedAt: t, Earlier: earlier}
	}
	part := func(t *metav1.Time, gpus ...int) ClearXidsPart { return ClearXidsPart{GPUs: gpus, RequestedAt: t} }
	tests := map[string]struct {
		r, replaced ClearXidsRequest
		want        []ClearXidsPart
	}{
		"another GPU": {r: req([]int{1}, at(21, 0)), replaced: req([]int{0}, at(20, 0)),
			want: []ClearXidsPart{part(at(20, 0), 0)}},
		"the same GPU, asked again": {r: req([]int{0}, at(21, 0)), replaced: req([]int{0}, at(20, 0))},
		"every GPU covers all":      {r: req(nil, at(21, 0)), replaced: req([]int{0, 3}, at(20, 0), part(at(19, 0)))},
		"some GPUs covered, some not": {r: req([]int{0}, at(21, 0)), replaced: req([]int{0, 3}, at(20, 0)),
			want: []ClearXidsPart{part(at(20, 0), 3)}},
		"every GPU, earlier, beside a GPU asked since": {r: req([]int{5}, at(21, 0)), replaced: req([]int{1}, at(20, 30), part(at(20, 0)), part(at(19, 0), 1, 2)),
			want: []ClearXidsPart{part(at(20, 0)), part(at(20, 30), 1)}},
		"a GPU the every-GPU part asked for since is dropped": {r: req([]int{5}, at(21, 0)), replaced: req(nil, at(20, 30), part(at(20, 0), 1, 2)),
			want: []ClearXidsPart{part(at(20, 30))}},
		"each GPU at its latest time": {r: req([]int{9}, at(21, 0)), replaced: req([]int{0}, at(20, 30), part(at(20, 0), 0, 1), part(at(20, 10), 1)),
			want: []ClearXidsPart{part(at(20, 10), 1), part(at(20, 30), 0)}},
		"the new request asks before the replaced one": {r: req([]int{0}, at(20, 0)), replaced: req([]int{0}, at(20, 30)),
			want: []ClearXidsPart{part(at(20, 30), 0)}},
		"a replaced request without a time is dropped": {r: req([]int{1}, at(21, 0)), replaced: req([]int{0}, nil, part(nil), part(at(20, 0), 2)),
			want: []ClearXidsPart{part(at(20, 0), 2)}},
		"a new request without a time covers its GPUs": {r: req([]int{0}, nil), replaced: req([]int{0, 1}, at(20, 0)),
			want: []ClearXidsPart{part(at(20, 0), 1)}},
		"times to the second": {r: req([]int{0}, &metav1.Time{Time: at(20, 0).Add(500 * time.Millisecond)}), replaced: req([]int{0}, &metav1.Time{Time: at(20, 0).Add(900 * time.Millisecond)})},
		"nothing to carry":    {r: req([]int{0}, at(21, 0)), replaced: req([]int{0}, nil)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.r.Merge(tc.replaced)
			want := tc.r
			want.Earlier = tc.want
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("merged request refused: %v", err)
			}
		})
	}
}

// TestClearXidsRequestMergeBounded: however many requests were merged
// before, the request carries at most 64 earlier parts of at most 64 GPUs,
// the latest ones.
func TestClearXidsRequestMergeBounded(t *testing.T) {
	r := ClearXidsRequest{ID: "r", GPUs: []int{0}, RequestedAt: at(0, 0)}
	start := r.RequestedAt.Time
	for i := 1; i <= 200; i++ {
		next := ClearXidsRequest{ID: "r", GPUs: []int{i}, RequestedAt: &metav1.Time{Time: start.Add(time.Duration(i) * time.Minute)}}
		r = next.Merge(r)
		if err := r.Validate(); err != nil {
			t.Fatalf("after %d merges: %v", i, err)
		}
	}
	if len(r.Earlier) != 64 {
		t.Fatalf("%d earlier parts, want 64", len(r.Earlier))
	}
	if first, last := r.Earlier[0], r.Earlier[63]; first.GPUs[0] != 136 || last.GPUs[0] != 199 {
		t.Errorf("earlier parts run from GPU %v to %v, want the latest, 136 to 199", first.GPUs, last.GPUs)
	}
	wide := ClearXidsRequest{ID: "w", RequestedAt: at(0, 0)}
	for i := range 100 {
		wide.GPUs = append(wide.GPUs, i)
	}
	merged := ClearXidsRequest{ID: "x", GPUs: []int{200}, RequestedAt: at(1, 0)}.Merge(wide)
	if got := merged.Earlier[0].GPUs; len(got) != 64 || got[0] != 36 {
		t.Errorf("earlier GPUs %v, want the 64 highest indexes", got)
	}
}
