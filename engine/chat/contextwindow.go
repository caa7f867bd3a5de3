package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ContextWindow reads context_window_size from the model
// directory's mlc-chat-config.json, as MLC's engines take it; 0 when there
// is none (no file or field, or -1, a sliding-window model).
func ContextWindow(model string) (int, error) {
	b, err := os.ReadFile(filepath.Join(model, mlcChatConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var cfg struct {
		ContextWindowSize *int `json:"context_window_size"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return 0, fmt.Errorf("mlc-chat-config.json: %w", err)
	}
	if cfg.ContextWindowSize == nil || *cfg.ContextWindowSize <= 0 {
		return 0, nil
	}
	return *cfg.ContextWindowSize, nil
}
