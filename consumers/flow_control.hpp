// The backpressure contract: a consumer that must not drop asks the suppliers feeding it to
// pause, and tells them to resume once its queue has drained below the low-water mark.
#pragma once

namespace gatewayd::consumers {

class flow_control_listener {
 public:
  // Called from the consumer's strand; implementations must only post, never block.
  virtual void resume_reading() = 0;
  // The backpressure consumer that paused the supplier has fallen behind (or lost its
  // connection): the pause lasts until it drains, however long it stalls. Consumer's strand;
  // post only.
  virtual void paused_by_stalled_consumer() = 0;

 protected:
  ~flow_control_listener() = default;
};

}  // namespace gatewayd::consumers
