;;;; progress.lisp - progress of long calls (knn_set_progress).
;;;;
;;;;   (let ((progress (knn:make-progress)))
;;;;     (knn:with-progress (progress)          ; registered for this thread
;;;;       ...long calls; another thread reads (knn:progress-snapshot progress)...))
;;;;
;;;; The record is a foreign knn_progress owned by the PROGRESS object; the
;;;; library updates it per chunk of work. Within a stage DONE never decreases
;;;; and ends at TOTAL; a stage begins at 0, or, when a GPU call's CPU fallback
;;;; begins it again, at what the stage had done before that call. SEQUENCE
;;;; counts the stages begun (one call may run several).

(in-package #:knn-gpgpu)

(cffi:defcstruct (knn-progress :size 24)
  (done :int64 :offset 0)
  (total :int64 :offset 8)
  (stage :int32 :offset 16)
  (sequence :int32 :offset 20))

(defstruct (progress (:constructor %make-progress (pointer)))
  "A knn_progress record the library writes while it is registered (SET-PROGRESS)."
  (pointer nil))

(defun make-progress ()
  "A new, zeroed progress record (freed by FREE-PROGRESS or the garbage collector)."
  (let* ((pointer (cffi:foreign-alloc '(:struct knn-progress)))
         (progress (%make-progress pointer)))
    (dotimes (i 24) (setf (cffi:mem-aref pointer :uint8 i) 0))
    #+sbcl (sb-ext:finalize progress (lambda () (cffi:foreign-free pointer)) :dont-save t)
    progress))

(defun live-progress (progress)
  (check-type progress progress)
  (or (progress-pointer progress) (usage-error "the progress record is freed")))

(defun progress-snapshot (progress)
  "(values sequence stage total done), read in the order the header documents;
STAGE is :idle, :build or :query (an integer for a later stage)."
  (let ((p (live-progress progress)))
    (let* ((sequence (cffi:foreign-slot-value p '(:struct knn-progress) 'sequence))
           (stage (cffi:foreign-slot-value p '(:struct knn-progress) 'stage))
           (total (cffi:foreign-slot-value p '(:struct knn-progress) 'total))
           (done (cffi:foreign-slot-value p '(:struct knn-progress) 'done)))
      (values sequence (if (< -1 stage 3) (aref #(:idle :build :query) stage) stage)
              total done))))

(defun set-progress (progress)
  "Register PROGRESS for the calling thread (NIL unregisters); zeroes it."
  (check-status "knn_set_progress"
                (%set-progress (if progress (live-progress progress) (cffi:null-pointer))))
  (values))

(defun free-progress (progress)
  "Free PROGRESS's foreign record (it must not be registered on any thread)."
  (check-type progress progress)
  (let ((pointer (progress-pointer progress)))
    (when pointer
      (setf (progress-pointer progress) nil)
      #+sbcl (sb-ext:cancel-finalization progress)
      (cffi:foreign-free pointer)))
  (values))

(defmacro with-progress ((progress) &body body)
  "Run BODY with PROGRESS registered for this thread; unregistered afterwards."
  (let ((p (gensym "PROGRESS")))
    `(let ((,p ,progress))
       (set-progress ,p)
       (unwind-protect (progn ,@body)
         (set-progress nil)))))
