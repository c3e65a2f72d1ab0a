/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package benchutil

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sample is one series of a scraped metric.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Fetch GETs url with hc and returns the body.
func Fetch(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	return FetchWithin(ctx, hc, url, time.Minute)
}

// FetchWithin is Fetch with its own time limit.
func FetchWithin(ctx context.Context, hc *http.Client, url string, limit time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// Scrape GETs a Prometheus text endpoint and parses its samples.
func Scrape(ctx context.Context, hc *http.Client, url string) ([]Sample, error) {
	body, err := Fetch(ctx, hc, url)
	if err != nil {
		return nil, err
	}
	return ParseSamples(body, nil), nil
}

// ParseSamples parses the Prometheus text exposition format, keeping the
// metrics keep accepts (every one when nil). Malformed lines are skipped.
func ParseSamples(body []byte, keep func(name string) bool) []Sample {
	var out []Sample
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line, keep)
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// parseSample parses one `name{l="v",...} value [timestamp]` line.
func parseSample(line string, keep func(string) bool) (Sample, bool) {
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return Sample{}, false
	}
	s := Sample{Name: line[:end], Labels: map[string]string{}}
	if keep != nil && !keep(s.Name) {
		return Sample{}, false
	}
	rest := line[end:]
	if rest[0] == '{' {
		var ok bool
		if rest, ok = parseLabels(rest[1:], s.Labels); !ok {
			return Sample{}, false
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return Sample{}, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return Sample{}, false
	}
	s.Value = v
	return s, true
}

// parseLabels reads `l="v",...}` into into and returns what follows the
// closing brace.
func parseLabels(s string, into map[string]string) (string, bool) {
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return "", false
		}
		if s[0] == '}' {
			return s[1:], true
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", false
		}
		name := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", false
		}
		into[name] = val.String()
		s = s[i+1:]
	}
}
