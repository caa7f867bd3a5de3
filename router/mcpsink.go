package router

import (
	"github.com/caddy-mlc/caddy-mlc/protocol"
)

// The hosted tools' items in the Responses API's sinks (mcp.go): whole,
// each is an output item; streamed, an mcp_list_tools is
// response.output_item.added, response.mcp_list_tools.in_progress,
// .completed (or .failed) and response.output_item.done; an mcp_call is
// added (in progress, no arguments yet), response.mcp_call.in_progress,
// its arguments in response.mcp_call_arguments.delta pieces and .done,
// then, once run, response.mcp_call.completed (or .failed) and done; an
// mcp_approval_request is added and done. The items of the work before
// the first round are sent after the events that open the response.

// mcpSink is a Responses sink that writes the hosted tools' items.
type mcpSink interface {
	callSink
	// answer is the response being written.
	answer() *responseAnswer
	// hostedItem adds a whole item: an mcp_list_tools, an
	// mcp_approval_request, an mcp_call run.
	hostedItem(item protocol.ResponseMessage) error
	// hostedCallStart adds an mcp_call in progress, its arguments
	// written; it returns its output index.
	hostedCallStart(item protocol.ResponseMessage) (int, error)
	// hostedCallEnd ends the mcp_call at index, run: item.
	hostedCallEnd(index int, item protocol.ResponseMessage) error
}

func (a *responseAnswer) answer() *responseAnswer { return a }

// hostedPre takes the items of the work before the first round, for the
// sink to write.
func (c *responseCall) hostedPre() []protocol.ResponseMessage {
	if c.hosted == nil {
		return nil
	}
	pre := c.hosted.pre
	c.hosted.pre = nil
	return pre
}

// endOpen ends the message being written, if any, before another item.
func (r *responsesWhole) endOpen() {
	if r.itemID != "" {
		r.closeMessage(protocol.ResponseCompleted)
	}
}

func (r *responsesWhole) hostedItem(item protocol.ResponseMessage) error {
	r.endOpen()
	r.items = append(r.items, item)
	return nil
}

func (r *responsesWhole) hostedCallStart(item protocol.ResponseMessage) (int, error) {
	r.endOpen()
	r.items = append(r.items, item)
	return len(r.items) - 1, nil
}

func (r *responsesWhole) hostedCallEnd(index int, item protocol.ResponseMessage) error {
	r.items[index] = item
	return nil
}

// endOpen ends the message being written, if any, before another item.
func (s *responsesStream) endOpen() error {
	if s.itemID == "" {
		return nil
	}
	return s.endMessage(protocol.ResponseCompleted)
}

// replayHosted sends the items of the work before the first round, as
// the response opens (before the message that may be opening).
func (s *responsesStream) replayHosted() error {
	for _, item := range s.rc.hostedPre() {
		if err := s.writeHosted(item); err != nil {
			return err
		}
	}
	return nil
}

func (s *responsesStream) hostedItem(item protocol.ResponseMessage) error {
	if err := s.endOpen(); err != nil {
		return err
	}
	return s.writeHosted(item)
}

// writeHosted sends a whole item's events.
func (s *responsesStream) writeHosted(item protocol.ResponseMessage) error {
	switch item.Type {
	case protocol.ItemMCPCall:
		index, err := s.startCall(item)
		if err != nil {
			return err
		}
		return s.hostedCallEnd(index, item)
	case protocol.ItemMCPListTools:
		listing := item
		listing.Tools = nil
		if err := s.added(listing); err != nil {
			return err
		}
		index := len(s.items)
		s.items = append(s.items, item)
		progress := []string{protocol.EventMCPListToolsInProgress, protocol.EventMCPListToolsCompleted}
		if present(item.Error) {
			progress[1] = protocol.EventMCPListToolsFailed
		}
		for _, name := range progress {
			if err := s.progress(name, item.ID, index); err != nil {
				return err
			}
		}
		return s.itemDone(index, item)
	}
	if err := s.added(item); err != nil {
		return err
	}
	s.items = append(s.items, item)
	return s.itemDone(len(s.items)-1, item)
}

func (s *responsesStream) hostedCallStart(item protocol.ResponseMessage) (int, error) {
	if err := s.endOpen(); err != nil {
		return 0, err
	}
	return s.startCall(item)
}

// startCall sends an mcp_call's opening events and arguments.
func (s *responsesStream) startCall(item protocol.ResponseMessage) (int, error) {
	calling := protocol.NewMCPCall(item.ID, item.ServerLabel, item.Name, "", item.ApprovalRequestID)
	if err := s.added(calling); err != nil {
		return 0, err
	}
	index := len(s.items)
	s.items = append(s.items, calling)
	if err := s.progress(protocol.EventMCPCallInProgress, item.ID, index); err != nil {
		return 0, err
	}
	for _, piece := range argumentPieces(item.Arguments) {
		e := protocol.ResponseArgumentsEvent{Type: protocol.EventMCPArgumentsDelta, ItemID: item.ID, OutputIndex: index, Delta: &piece}
		if err := s.event(e.Type, &e, &e.SequenceNumber); err != nil {
			return 0, err
		}
	}
	done := protocol.ResponseArgumentsEvent{Type: protocol.EventMCPArgumentsDone, ItemID: item.ID, OutputIndex: index, Arguments: &item.Arguments}
	s.items[index].Arguments = item.Arguments
	return index, s.event(done.Type, &done, &done.SequenceNumber)
}

func (s *responsesStream) hostedCallEnd(index int, item protocol.ResponseMessage) error {
	s.items[index] = item
	name := protocol.EventMCPCallCompleted
	if item.Status == protocol.ResponseFailed {
		name = protocol.EventMCPCallFailed
	}
	err := s.progress(name, item.ID, index)
	if err == nil {
		err = s.itemDone(index, item)
	}
	s.flush() // between rounds: no round flushes it
	return err
}

// progress sends an MCP item's progress event.
func (s *responsesStream) progress(name, itemID string, index int) error {
	e := protocol.ResponseMCPEvent{Type: name, ItemID: itemID, OutputIndex: index}
	return s.event(e.Type, &e, &e.SequenceNumber)
}

// itemDone sends response.output_item.done of the item at index.
func (s *responsesStream) itemDone(index int, item protocol.ResponseMessage) error {
	e := protocol.ResponseItemEvent{Type: protocol.EventOutputItemDone, OutputIndex: index, Item: item}
	return s.event(e.Type, &e, &e.SequenceNumber)
}
