// A recording's player kept in step with a timeline (issue 24): clicking an entry seeks
// the video to it; while it plays (or is scrubbed), the entry of the moment is marked
// `current`. `timeOf(li)` says where an entry is in the video, in seconds.
export function syncTimeline(video, list, timeOf) {
  list.addEventListener('click', (event) => {
    const li = event.target.closest('li');
    if (!li || !list.contains(li)) return;
    const at = timeOf(li);
    if (Number.isFinite(at)) video.currentTime = Math.max(0, at);
  });
  const mark = () => {
    let best = null;
    let bestAt = -Infinity;
    for (const li of list.children) {
      const at = timeOf(li);
      if (Number.isFinite(at) && at <= video.currentTime + 0.05 && at > bestAt) { best = li; bestAt = at; }
    }
    for (const li of list.querySelectorAll('li.current')) if (li !== best) li.classList.remove('current');
    if (best && !best.classList.contains('current')) {
      best.classList.add('current');
      best.scrollIntoView({ block: 'nearest' });
    }
  };
  video.addEventListener('timeupdate', mark);
  video.addEventListener('seeked', mark);
  return mark;
}
