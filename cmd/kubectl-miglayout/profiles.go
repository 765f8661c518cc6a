package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/miglayout/miglayout/pkg/mig"
)

// profilesJSON is the stable JSON shape of `profiles -o json`: one entry per
// GPU model.
type profilesJSON struct {
	Product   string        `json:"product"`
	Model     string        `json:"model"`
	MemoryMiB int64         `json:"memoryMiB"`
	Profiles  []profileJSON `json:"profiles"`
}

type profileJSON struct {
	Name          string          `json:"name"`
	ID            int             `json:"id"`
	ComputeSlices int             `json:"computeSlices"`
	MemorySlices  int             `json:"memorySlices"`
	MemoryMiB     int64           `json:"memoryMiB"`
	MaxCount      int             `json:"maxCount"`
	Placements    []mig.Placement `json:"placements"`
	Unverified    []string        `json:"unverified,omitempty"`
}

func newProfilesCommand() *cobra.Command {
	var gpuName, output string
	cmd := &cobra.Command{
		Use:   "profiles [--gpu NAME] [-o table|json]",
		Short: "Print the MIG GPU-instance profiles of each known GPU model",
		Long: `Print the catalog of MIG GPU-instance profiles that miglayout validates and
plans with: GI profile ID (as nvidia-smi shows it), compute and memory slices,
memory in MiB, the most instances per GPU, and the valid placements
(start:size on the memory-slice axis). Values marked "*" are not given by a
cited NVIDIA source; on a node the agent reads them from NVML.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			models := mig.DefaultCatalog().Models()
			if gpuName != "" {
				m, err := mig.DefaultCatalog().Model(gpuName)
				if err != nil {
					return err
				}
				models = []*mig.Model{m}
			}
			switch output {
			case "json":
				return writeProfilesJSON(cmd.OutOrStdout(), models)
			case "table", "":
				return writeProfilesTable(printable{cmd.OutOrStdout()}, models)
			default:
				return fmt.Errorf("unknown output format %q (valid: table, json)", output)
			}
		},
	}
	cmd.Flags().StringVar(&gpuName, "gpu", "", "only this GPU model (name, NVML product name or alias, e.g. A100-SXM4-80GB)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func writeProfilesJSON(w io.Writer, models []*mig.Model) error {
	out := make([]profilesJSON, 0, len(models))
	for _, m := range models {
		e := profilesJSON{Product: m.ProductName, Model: m.Name, MemoryMiB: m.MemoryMiB}
		for _, p := range m.Profiles {
			e.Profiles = append(e.Profiles, profileJSON{
				Name: p.Name, ID: p.ID, ComputeSlices: p.ComputeSlices, MemorySlices: p.MemorySlices,
				MemoryMiB: p.MemoryMiB, MaxCount: p.MaxCount, Placements: p.Placements, Unverified: p.Unverified,
			})
		}
		out = append(out, e)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeProfilesTable(w io.Writer, models []*mig.Model) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	marked := false
	for i, m := range models {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s (%s, %s, %d MiB, %d memory slices)\n", m.Name, m.ProductName, m.Architecture, m.MemoryMiB, m.MemorySlices)
		fmt.Fprintln(tw, "  PROFILE\tID\tCOMPUTE\tMEMORY SLICES\tMEMORY MiB\tMAX\tPLACEMENTS")
		for _, p := range m.Profiles {
			mark := func(field, v string) string {
				for _, u := range p.Unverified {
					if u == field {
						marked = true
						return v + "*"
					}
				}
				return v
			}
			pls := make([]string, len(p.Placements))
			for j, pl := range p.Placements {
				pls[j] = fmt.Sprintf("%d:%d", pl.Start, pl.Size)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%d\t%s\n", p.Name, mark("id", strconv.Itoa(p.ID)), p.ComputeSlices, p.MemorySlices,
				mark("memoryMiB", strconv.FormatInt(p.MemoryMiB, 10)), p.MaxCount, mark("placements", strings.Join(pls, " ")))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if marked {
		_, err := fmt.Fprintln(w, "\n* unverified: no cited source gives this value; on a node, the agent reads it from NVML and reports where NVML differs (NodeMigLayout status.gpus[].nvmlProfiles, catalogMismatches)")
		return err
	}
	return nil
}
